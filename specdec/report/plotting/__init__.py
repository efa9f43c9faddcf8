"""Every figure of the book, one function each, drawn from the chapters' tables (DataFrames).

A function takes the table(s) a chapter read back and the parameters it needs for labels, and
returns a matplotlib Figure; the chapter shows (and when recomputing saves) it with
`specdec.report.chapter.Chapter.figure`.  Nothing here computes a result: the data behind every
figure is a committed table.  Modules by topic: `exactness` (chapters 01-02), `cost` (03),
`measured` (04-05), `decoding` (06-07), `alternatives` (08), `serving` (09), `engines` (10); all names are re-exported here.
"""

from specdec.report.plotting.alternatives import *  # noqa: F401,F403
from specdec.report.plotting.cost import *  # noqa: F401,F403
from specdec.report.plotting.decoding import *  # noqa: F401,F403
from specdec.report.plotting.engines import *  # noqa: F401,F403
from specdec.report.plotting.exactness import *  # noqa: F401,F403
from specdec.report.plotting.measured import *  # noqa: F401,F403
from specdec.report.plotting.serving import *  # noqa: F401,F403
from specdec.report.plotting.ties import *  # noqa: F401,F403
from specdec.report.plotting.style import visible_series  # noqa: F401
