# A stand-in for python:3.11-slim where no registry is reachable: Debian bookworm's Python 3.11
# with pip, venv and the headers (the official image has them; vLLM's torch.compile needs
# Python.h), and this machine's CA certificates (certs/*.crt beside this file) for the HTTPS proxy.
FROM localhost/bookworm
COPY certs/ /usr/local/share/ca-certificates/
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-pip python3-venv python3-dev python-is-python3 \
        ca-certificates \
 && update-ca-certificates \
 && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED \
 && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8
CMD ["python3"]
