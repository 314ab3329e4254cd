"""Datasets: converters from raw formats to one HDF5 layout (`hdf5`), and the per-worker loader (`loader`)."""
