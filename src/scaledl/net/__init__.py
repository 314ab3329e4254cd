"""The network stage: `measure` (the `scaledl netbench` measurement of α, β and
collective times) and `alphabeta` (the α-β cost model of each message pattern)."""
