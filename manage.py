#!/usr/bin/env python
"""Django's command-line entry point for the playground.

`python manage.py playground` starts everything (see playground/management/commands/).
"""
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
