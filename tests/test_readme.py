"""The README's DSL examples run as they are: each ```python block of the DSL section, in order,
in one namespace (their asserts state the results)."""

import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def dsl_blocks():
    text = open(README).read()
    section = text.split("## The DSL", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_dsl_examples_run(spark):
    blocks = dsl_blocks()
    assert len(blocks) == 6
    namespace = {}
    for index, block in enumerate(blocks):
        exec(compile(block, f"README.md, DSL example {index}", "exec"), namespace)
