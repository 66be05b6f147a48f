"""`python -m app` / `voice-agent`: parse settings, then serve."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError


def main(argv: Sequence[str] | None = None) -> int:
    from app.cli import settings_from_args

    try:
        settings = settings_from_args(argv)
    except ValidationError as exc:
        sys.stderr.write(f"invalid settings:\n{exc}\n")
        return 2

    import uvicorn

    from app.logs import configure_logging
    from app.main import create_app

    configure_logging(settings.server.log_level)
    logging.getLogger(__name__).info(
        "serving on http://%s:%d (agent=%s, max_sessions=%d)",
        settings.server.host,
        settings.server.port,
        settings.agent,
        settings.pool.max_sessions,
    )
    uvicorn.run(
        create_app(settings),
        host=settings.server.host,
        port=settings.server.port,
        log_config=None,
        timeout_graceful_shutdown=8,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
