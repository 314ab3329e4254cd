"""The training run: what `scaledl train` does.

`loop` is the document (setup, the paper's per-iteration loop, results);
`setup` builds the run on every rank, `monitor` and `evaluation` watch the
center, `checkpoint` saves and resumes, `outputs` writes what a run leaves.
This package's own import is light: `scaledl.train.command` builds the
`scaledl train` parser without initialising MPI.
"""
