"""One module per subcommand of ``proofbatch``.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Library code raises; these modules only translate
arguments into configuration and results into text. ``runner.cli`` turns
errors into exit codes.
"""

import argparse

from ..sizes import parse_size


def size(text: str) -> int:
    """argparse type for a memory size such as 4G or 512M."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
