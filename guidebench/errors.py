"""Errors the CLI reports as one clear line instead of a traceback."""


class GuidebenchError(Exception):
    """A user-facing error: bad input, a missing file, an impossible request."""


def refuse_unfitted(entry: str, where: str) -> None:
    """Raise the one-line error for a trained program taken straight from the registry (it has no model yet)."""
    import programs

    if programs.spec(entry).trained:
        raise GuidebenchError(f"{where} {entry}: a trained program must be fitted first: `guidebench compile "
                              f"--program {entry} --optimizer fit --data DIR`, then use its compile (`--results "
                              "COMPILE/test`, `--from-mlflow`) or its export")
