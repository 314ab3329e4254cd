"""Who is who, the flat parameter buffer, the run's clock (`timing`, on the transport's clock), the message
patterns, and the transport seam they all go through (MPI, or the simulator in scaledl.sim)."""
