"""The paper's claims, checked against the summary table with named verdict rules.

The claims are data (claims.yaml beside this module, or a file of the same
shape), fixed before any run: the report prints the file's git blob hash.
Each names a rule from `RULES` and gives its parameters. A rule reads the
runs of one *setting* (the claim's `per` columns, by default
scaledl.report.runs.SETTING: dataset, model, platform and workers) under one
*protocol* and returns a `Verdict`: **holds**, **reversed** (the opposite is
shown), **not tied** (a tie claim whose sides are shown apart: the tie is
refuted, which is not the opposite of the claim), **inconclusive** (neither
is shown at the claims' level) or **not comparable here** (the runs cannot
say), with our numbers and a reason.

Protocols. A claim is judged twice where the config ran both: on the
**tuned** runs (setting `tuned`: each algorithm at its own best settings from
the tune stage, an equal budget of trials per method) and on the
**shared-η** runs (no setting: one step size for every method, the ablation;
and each point of a sweep, `lr0.05`, judged on its own: the row's setting names
it), so a reader sees how much of a verdict the protocol decides. A side is one
configuration (its settings, swept or not: scaledl.report.identity); runs of
one algorithm at several settings are never pooled as seeds, but refused. A claim whose
sides name a setting (`sync_sgd@tuned-lr0.1x`) is judged once, on those runs
(the controls).

Protocol of a comparison, common to every rule:

- **Samples.** A side is the runs of one algorithm (and worker count) in the
  setting; its samples are the metric's values, one per seed. A time, steps
  or bytes to target of a run that never reached it is +∞, never dropped;
  times and steps to target are the crossing interpolated between
  evaluations (scaledl.train.monitor.crossing). Another missing value (no
  steady state) is left out, which lowers n.
- **Pairing and the test.** The sides are paired by seed; each seed is *for*
  the claim (beyond the margin), *against* it (beyond the margin the other
  way), *tied* (within it) or *undefined* (neither reached the target). The
  exact one-sided sign test over every seed decides at α = 0.05 (`alpha`):
  holds when the seeds for are significant among all n, reversed when those
  against are, inconclusive otherwise; a tied or undefined seed counts
  against whichever direction is tested, so the margin or the evaluation
  spacing cannot make a claim easier to decide by moving seeds into ties.
  Each row says k for, j against, t tied of n. With n seeds the test can
  decide only when enough of them agree (all 5 of 5, 6 of 6, 7 of 8, ...):
  the row says how many, the smallest effect n could detect. A side with fewer than
  `min_seeds` samples makes the setting not comparable.
- **Numbers.** The median speedup over the seeds with the exact
  order-statistic interval of that median (stats.median_interval: the
  narrowest [x(k), x(n+1−k)] covering it with at least 95 %, labelled with
  its true coverage, e.g. "93.8 %" for [min, max] of 5), n, and, for times to target, the decomposition
  *time = steps to target × seconds per step* of each side, and of the
  speedup into its two factors: does a method win by needing fewer steps or
  by cheaper steps.

Rules (parameter defaults in the claims file's `defaults`):

- ``faster`` (A reaches the target sooner than B): a seed is for when
  t_B / t_A > 1 + margin, against when t_A / t_B > 1 + margin.
- ``faster_and_stable``: ``faster``, and A more stable than B: A reaches the
  target in more seeds (Fisher's exact test, one-sided), or, both in every
  seed, A's times vary less (the Brown–Forsythe test on log times, one-sided
  by the sign of the spread difference; both sides constant over seeds leave
  no spread to compare: inconclusive). Holds when both hold; reversed when
  either is reversed; inconclusive otherwise.
- ``unbeaten`` (A is beaten by no method of the list B1 … Bm): A is paired
  with each Bi by seed as in ``faster``. **Reversed** when some Bi is
  significantly faster than A after Holm's correction over the m one-sided
  p-values (of "Bi faster"): the reason names each with its adjusted p.
  **Holds** when A is shown not slower than every Bi: for each, the sign
  test of "not slower beyond the margin" (a seed is for when
  t_Bi / t_A ≥ 1 / (1 + margin)) is significant at α; all m must be, so no
  correction applies (an intersection–union test). **Inconclusive**
  otherwise: no rival is shown faster, nor is A shown not slower than all.
- ``tied`` (A and B tied within ±tie): the exact interval of the median log
  speedup of A over B at a coverage of at least 90 % (printed with its true
  coverage) within ±log(1 + tie) (two one-sided tests):
  holds; wholly outside it: **not tied** (its own verdict, naming the faster
  side, never "reversed": a clear winner does not contradict that both are
  the fastest); an interval that straddles the band, or is undefined:
  inconclusive.
- ``share_lower`` (a share falls from A to B): a seed is for when the drop
  exceeds the margin (share points). A simulated share is one measurement
  per side (its median over seeds, which differ only by timing noise; one
  seed suffices), the drop beyond ±margin deciding, with no sign test.
- ``less_communication`` (A reaches the target exchanging at most 1/factor of
  B's bytes): a seed is for when B's bytes over A's is at least `factor`.
- ``weak_scaling_efficiency``: per sweep over the worker count and per seed,
  E = seconds per step at the smallest P over that at the largest; a seed is
  for when E ≥ the paper's value − margin. A simulated sweep is one number per
  configuration (its seeds differ only by timing noise): its median E decides,
  without a sign test. With a netbench file the α-β
  model's efficiency at our largest P and at `extrapolate_to` is printed.
- ``not_slower`` (the inclusion check: a general method tuned must not lose
  to its own special case tuned, e.g. DiLoCo with outer lr 1 and momentum 0
  is local SGD), on time to target for a timing-equivalent pair and on steps
  to target for a pair equivalent only in its numerics (Async MSGD with its
  momentum at the master moves twice the bytes per step of Async SGD). With
  `sided` 1, reversed when the special case is significantly better
  (one-sided); with `sided` 2, a two-sided test at α decides in the
  direction it finds (the general better: holds). Otherwise holds only when
  the general method is shown not worse beyond the margin (a seed within it
  counts for), else inconclusive. A reversal names its cause: where the
  rule's `special_case` (the settings that make the general method its
  special case, e.g. {momentum: 0}) lies outside what the general method's
  tune swept (the tuned runs' `tuned_swept`), "its special case lies outside
  its search space", with the value each setting was fixed at; only inside
  it, "tuning budget too small for" the general method.

- ``same_numerics`` (the A/A check: two algorithms that do the same
  arithmetic, the registry's `numerics_of`, reach the target in the same
  steps): tied on steps to target as in ``tied``; when not, the reason says
  what decided it: the tuning (the sides ran at different chosen settings,
  printed) or, at the same settings, the harness.

**Undefined tests.** A test whose result is undefined (NaN: Levene's test
on two constant sides, an interval or efficiency over undefined ratios) is
inconclusive, its reason saying why; NaN never falls through a comparison
into another verdict.

**Distinct values.** Each side's numbers say how many distinct values its n
seeds gave ("n=5, 2 distinct"): seeds that repeat one number (a
deterministic simulated time, times to target quantised by the evaluation
interval) are fewer observations than n says.

**Needs.** A setting that misses a claim's `needs` (the device, dataset,
model, target or scale the paper's number belongs to) is not comparable here
whatever the rule found; the rule's numbers and finding stay in the reason.

The package, in the order a claim is judged: `load` reads claims.yaml into `Claim`s; `evaluate` runs each
claim under each protocol on each setting; `rules` (and `checks`, the harness's own: inclusion and A/A) decide
a verdict; `sides` picks a side's runs and compares two over seeds; `context` holds what the summary does not
say; `page` writes claims.md; `words` is the vocabulary every one of them speaks.
"""

from __future__ import annotations

from scaledl.report.claims.checks import (
    HYPERPARAMETERS,
    NOT_SETTINGS,
    chosen_settings,
    outside_search_space,
    rule_not_slower,
    rule_same_numerics,
)
from scaledl.report.claims.context import (
    DEVICE_KINDS,
    Context,
    normalise_device,
    oversubscribed_sides,
    read_sensitivity,
    sensitivity_of,
    simulated_platform,
    unmet_needs,
    untuned,
    with_choices,
)
from scaledl.report.claims.evaluate import (
    check_columns,
    evaluate,
    evaluate_claim,
    grid_point,
    judge,
    protocols_of,
    read_summary,
    required_columns,
    setting_label,
)
from scaledl.report.claims.load import CLAIM_KEYS, NEEDS_KEYS, default_claims_text, load_claims, parse_claim
from scaledl.report.claims.page import (
    aa_ids,
    agreement_counts,
    agreements,
    blob_hash,
    claims_markdown,
    inclusion_ids,
    not_judged,
    overview,
    side_by_side,
    verdict_named,
)
from scaledl.report.claims.rules import (
    AA_RULES,
    INCLUSION_RULES,
    RULES,
    Rule,
    alpha_beta_efficiency,
    rule_faster,
    rule_faster_and_stable,
    rule_less_communication,
    rule_share_lower,
    rule_tied,
    rule_unbeaten,
    rule_weak_scaling_efficiency,
    simulated_share_drop,
)
from scaledl.report.claims.sides import (
    TUNED_COLUMNS,
    Comparison,
    Side,
    as_verdict,
    combined,
    compare,
    decided,
    decomposition,
    describe,
    equivalence,
    factors,
    more_stable,
    not_reached_note,
    not_slower_test,
    outcome,
    paired,
    pick_side,
    ratio_numbers,
    reached_median,
    reached_rows,
    samples,
    seeds_problem,
    several_configurations,
    sides_or_missing,
    target_problem,
    test_text,
    tuned_choice_text,
)
from scaledl.report.claims.words import (
    CLAIM_COLUMNS,
    CONTROL,
    HOLDS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_TIED,
    PROTOCOL_WORDS,
    PROTOCOLS,
    REVERSED,
    RUNNER_UP,
    SHARED,
    STEPS_METRIC,
    TIME_METRIC,
    TO_TARGET_METRICS,
    TUNED,
    VERDICTS,
    Claim,
    Verdict,
    algorithms_of,
    protocol_word,
    row,
    sides_of,
    split_setting,
)

__all__ = [
    "CLAIM_COLUMNS",
    "CONTROL",
    "Claim",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_COMPARABLE",
    "NOT_TIED",
    "PROTOCOLS",
    "PROTOCOL_WORDS",
    "REVERSED",
    "RUNNER_UP",
    "SHARED",
    "STEPS_METRIC",
    "TIME_METRIC",
    "TO_TARGET_METRICS",
    "TUNED",
    "VERDICTS",
    "Verdict",
    "algorithms_of",
    "protocol_word",
    "row",
    "sides_of",
    "split_setting",
    "Comparison",
    "Side",
    "TUNED_COLUMNS",
    "as_verdict",
    "combined",
    "compare",
    "decided",
    "decomposition",
    "describe",
    "equivalence",
    "factors",
    "more_stable",
    "not_reached_note",
    "not_slower_test",
    "outcome",
    "paired",
    "pick_side",
    "ratio_numbers",
    "reached_median",
    "reached_rows",
    "samples",
    "seeds_problem",
    "several_configurations",
    "sides_or_missing",
    "target_problem",
    "test_text",
    "tuned_choice_text",
    "Context",
    "DEVICE_KINDS",
    "normalise_device",
    "oversubscribed_sides",
    "read_sensitivity",
    "sensitivity_of",
    "simulated_platform",
    "unmet_needs",
    "untuned",
    "with_choices",
    "HYPERPARAMETERS",
    "NOT_SETTINGS",
    "chosen_settings",
    "outside_search_space",
    "rule_not_slower",
    "rule_same_numerics",
    "AA_RULES",
    "INCLUSION_RULES",
    "RULES",
    "Rule",
    "alpha_beta_efficiency",
    "rule_faster",
    "rule_faster_and_stable",
    "rule_less_communication",
    "rule_share_lower",
    "rule_tied",
    "rule_unbeaten",
    "rule_weak_scaling_efficiency",
    "simulated_share_drop",
    "check_columns",
    "evaluate",
    "evaluate_claim",
    "grid_point",
    "judge",
    "protocols_of",
    "read_summary",
    "required_columns",
    "setting_label",
    "aa_ids",
    "agreement_counts",
    "agreements",
    "blob_hash",
    "claims_markdown",
    "inclusion_ids",
    "not_judged",
    "overview",
    "side_by_side",
    "verdict_named",
    "CLAIM_KEYS",
    "NEEDS_KEYS",
    "default_claims_text",
    "load_claims",
    "parse_claim",
]
