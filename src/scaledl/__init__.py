"""scaledl: the Elastic Averaging SGD family of You, Buluç & Demmel (SC'17) over MPI."""

__version__ = "0.1.0"
