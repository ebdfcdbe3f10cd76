"""Command line: ``python -m course doctor`` and ``python -m course prepare``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check this machine is ready; exit 1 on any problem")
    sub.add_parser("prepare", help="prepare offline assets (GPT-2 tokenizer, bundled model)")
    args = parser.parse_args(argv)
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
