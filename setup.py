"""The one part of the build pyproject.toml cannot declare: the TORCH_LOGS reader's hot loop in C
(ingest/text/_skim.c). It is optional: where no C compiler is at hand the install goes on
and the reader runs the same rules in Python (reader.RecordAssembler.feed_lines and _fresh)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("compilewatch.ingest.text._skim",
                             sources=["ingest/text/_skim.c"], optional=True)])
