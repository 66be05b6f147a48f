"""Poll a server's /readyz every 20 ms, from a process of its own, until stdin closes;
then print the slowest answer in seconds, and when the last answers slower than SLOW_S
came (seconds from the first poll). A process, not a thread of the test's: a test process
that has run hundreds of tests can pause its own threads (its garbage collector, its
other threads' GIL), and those pauses are not the server's. Prints "polling" once the
first answer came."""

from __future__ import annotations

import sys
import threading
import time

import httpx

SLOW_S = 0.25


def main(url: str) -> None:
    stop = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    worst = 0.0
    slow: list[str] = []
    with httpx.Client(timeout=120) as http:
        http.get(f"{url}/readyz")
        sys.stdout.write("polling\n")
        sys.stdout.flush()
        first = time.monotonic()
        while not stop.is_set():
            started = time.monotonic()
            http.get(f"{url}/readyz")  # 200 or 503 (full): both answers
            took = time.monotonic() - started
            worst = max(worst, took)
            if took > SLOW_S:
                slow.append(f"{took * 1000:.0f} ms at {started - first:.1f} s")
            stop.wait(0.02)
    sys.stdout.write(f"{worst}\n{', '.join(slow[-8:])}\n")


if __name__ == "__main__":
    main(sys.argv[1])
