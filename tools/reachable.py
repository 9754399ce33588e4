"""Exit 0 when URL answers within SECONDS (default 3), else 1, whatever hangs.

    python tools/reachable.py URL [SECONDS]

The Makefile's probe of PyTorch's CPU wheel index: a socket timeout does not
bound a DNS lookup, so the request runs in a thread and the wait is bounded.
Standard library only: it runs before the virtual environment exists.
"""

import sys
import threading
import urllib.request


def main() -> int:
    url = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    answered, done = threading.Event(), threading.Event()

    def ask() -> None:
        try:
            with urllib.request.urlopen(url, timeout=seconds):
                answered.set()
        except Exception:  # any failure means "not reachable": the caller falls back
            pass
        finally:
            done.set()

    threading.Thread(target=ask, daemon=True).start()
    done.wait(seconds)  # a failure (no such host) ends the wait at once
    return 0 if answered.is_set() else 1


if __name__ == "__main__":
    sys.exit(main())
