"""Column-name plumbing shared by the DSL (``kstream``) and the processor plan."""


def quote(name: str) -> str:
    """``name`` as one column for ``F.col``: backquoted, a backquote in it doubled (Spark's
    rule), so that a dot or a backquote in a user's column name is not read as a path.

    >>> quote("a.b"), quote("k`ey")
    ('`a.b`', '`k``ey`')
    """
    return "`" + name.replace("`", "``") + "`"
