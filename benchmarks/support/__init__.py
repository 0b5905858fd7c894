"""What the benchmark scripts share, one concept per module.

* :mod:`support.provenance`: where a run happened (machine, package
  versions, commit), the command line, logging to stderr.
* :mod:`support.isolation`: running one measurement in a forked child with
  a time limit and an address-space limit; the kernel's peak-RSS meter.
* :mod:`support.data`: reading JSONSchemaBench (``../shared/data/jsonschemabench``
  beside the repository, or ``$TOKENDFA_JSONSCHEMABENCH``), deterministic
  samples, round-robin selection over sources, compact JSON text.
* :mod:`support.engines`: tokendfa, outlines-core, xgrammar and llguidance
  behind one small interface (build from a schema or a regex for a
  vocabulary, fill the mask, consume a token).
* :mod:`support.report`: number formats, quantiles and markdown tables.

The scripts run as plain files (``python benchmarks/bench_x.py``), so Python
puts ``benchmarks/`` on ``sys.path`` and they import ``support.<module>``.
These modules import the library only as the installed ``tokendfa``, and
import outlines-core, xgrammar, llguidance and torch only inside the
functions that need them.
"""
