"""Command line: ``python -m course doctor``, ``python -m course prepare`` and ``python -m course
phoenix``."""

from __future__ import annotations

import argparse
import sys

from course.cli import seconds, whole_number
from course.phoenix import PHOENIX_PORT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check this machine is ready; exit 1 on any problem")
    sub.add_parser("prepare", help="prepare offline assets (GPT-2 tokenizer, bundled model)")
    phoenix = sub.add_parser("phoenix", help="start Phoenix, a trace UI, on localhost (its own "
                             "environment, made once; Ctrl-C stops it)")
    phoenix.add_argument("--port", type=whole_number(1024, 65535, PHOENIX_PORT),
                         default=PHOENIX_PORT, help="the UI's and OTLP/HTTP's port on 127.0.0.1 "
                         f"(default {PHOENIX_PORT})")
    phoenix.add_argument("--timeout", type=seconds(3600, example=120), default=120.0,
                         help="seconds to wait until it answers (default 120)")
    phoenix.add_argument("--install-only", action="store_true",
                         help="make its environment (.venv-phoenix) and exit")
    args = parser.parse_args(argv)
    if args.command == "phoenix":
        from course.phoenix import PhoenixError
        from course.phoenix import main as phoenix_main

        try:
            return phoenix_main(args.port, timeout=args.timeout, install_only=args.install_only)
        except PhoenixError as err:  # the message says why and the fix
            parser.exit(2, f"{parser.prog} phoenix: {err}\n")
    if args.command == "prepare":
        from course.assets import AssetError, prepare_offline_assets
        from course.models import converted_copy_cannot_load
        from course.settings import CourseSettingError

        try:
            prepared = prepare_offline_assets(cannot_load=converted_copy_cannot_load)
        except (AssetError, CourseSettingError) as err:  # the message names the setting, the fix
            parser.exit(2, f"{parser.prog} prepare: {err}\n")
        for name, path in prepared.items():
            print(f"{name}: {path}")
        return 0
    from course.doctor import report

    return 0 if report() else 1


if __name__ == "__main__":
    sys.exit(main())
