"""The simulated cluster: the same code as over MPI, its ranks SimGrid actors in one process, its time the platform's.

The simulator implements comm's transport seam (scaledl.comm.transport):
`run.Simulation` installs a simulated MPI (`mpi`, with MPICH's collective
algorithms in `collectives`) for a job's duration, so the loop, the engines and
the patterns run unchanged. What the ranks' work costs is priced by a roofline
(`roofline`) on the hosts a platform file describes (`platform`; shipped ones in
platforms/, and `calibrate` fits one to this machine). SimGrid is an optional
dependency (`loader`). This package imports comm, never the other way round:
the commands that run on a simulated platform (`scaledl simulate`, `scaledl
netbench --platform-file`) choose the transport.
"""
