"""Static analysis of a pattern: pure functions over automata.

Reading order:

* :mod:`analysis.errors`       the one exception hierarchy (lowest layer)
* :mod:`analysis.utf8`         code points to UTF-8 byte ranges (the only place)
* :mod:`analysis.regex_syntax` precise errors for bad or unsupported regexes
* :mod:`analysis.bytedfa`      regex -> complete, minimal byte-level DFA
* :mod:`analysis.byteclasses`  bytes no state can tell apart; dead bytes
* :mod:`analysis.signatures`   tokens grouped by their byte-class sequence

Nothing here imports :mod:`index`; interegular is imported only inside the
function that compiles a regex, so importing this package stays cheap.
"""
