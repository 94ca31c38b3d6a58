"""Rounds that only synchronise."""


def barrier(fw, name):
    """Returns (eagerly) once every rank has reached it: one small sum."""
    return fw.sum(fw.table(0), name)
