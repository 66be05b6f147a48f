"""Poll a server's /readyz every 20 ms, from a process of its own, until stdin closes;
then print the slowest answer in seconds. A process, not a thread of the test's: a test
process that has run hundreds of tests can pause its own threads (its garbage collector,
its other threads' GIL), and those pauses are not the server's. Prints "polling" once the
first answer came."""

from __future__ import annotations

import sys
import threading
import time

import httpx


def main(url: str) -> None:
    stop = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    worst = 0.0
    with httpx.Client(timeout=120) as http:
        http.get(f"{url}/readyz")
        sys.stdout.write("polling\n")
        sys.stdout.flush()
        while not stop.is_set():
            started = time.monotonic()
            http.get(f"{url}/readyz")  # 200 or 503 (full): both answers
            worst = max(worst, time.monotonic() - started)
            stop.wait(0.02)
    sys.stdout.write(f"{worst}\n")


if __name__ == "__main__":
    main(sys.argv[1])
