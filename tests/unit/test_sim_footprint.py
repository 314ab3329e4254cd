"""The estimate a simulation prints before it starts, and the refusal of one that cannot fit in memory."""

from scaledl.sim.footprint import estimate, refusal

GOOGLENET = (26_499_616, 173)  # bytes of weights, parameter tensors


def test_a_time_only_run_grows_by_its_ranks_actors_a_full_one_by_their_replicas():
    fast = [estimate(n, 5, *GOOGLENET, time_only=True) for n in (64, 1024)]
    full = [estimate(n, 5, *GOOGLENET, time_only=False) for n in (64, 1024)]
    assert fast[1].memory_bytes - fast[0].memory_bytes < 2e9 < full[1].memory_bytes - full[0].memory_bytes
    assert 12e9 < full[0].memory_bytes < 17.6e9  # 64 full GoogLeNet ranks took 17.6 GB, a forward and backward more
    assert fast[0].wall_s < fast[1].wall_s and full[0].wall_s is None
    assert estimate(64, None, *GOOGLENET, time_only=True).wall_s is None  # a budget in epochs: no step count
    assert "1024 ranks × 5 steps, time-only: about" in fast[1].line()


def test_a_simulation_that_cannot_fit_is_refused_in_one_line_naming_the_way_out():
    full = estimate(1024, 5, *GOOGLENET, time_only=False)
    line = refusal(full, available=20e9)
    assert line.startswith("this simulation would need about 200.4 GB") and "--time-only" in line
    assert "\n" not in line
    fast = estimate(1024, 5, *GOOGLENET, time_only=True)
    assert refusal(fast, available=20e9) is None and refusal(full, available=None) is None
    assert refusal(fast, available=1e9).endswith("use fewer ranks")


def test_a_simulation_caps_malloc_at_one_arena_where_glibc_runs_it():
    """Its ranks are threads computing one at a time; an arena per thread kept each rank's freed activations
    (a full 8-rank GoogLeNet simulation: 17.3 GB against 9.6 GB with one arena), and a rising mmap threshold
    left them in the heap between the ranks' buffers (8.9 GB against 5.5 GB with it held at 1 MiB)."""
    import platform

    from scaledl.sim.run import one_malloc_arena

    assert one_malloc_arena() == (platform.libc_ver()[0] == "glibc")
