# Nodmix gateway image: `docker build -t nodmix .` (see docs/deployment.md).
# Python from the official slim image, Nodmix with its PostgreSQL extra from this source tree,
# the sandbox runtime and web assets fetched from their npm packages (hash-verified) at build.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NODMIX_STATE_DIR=/var/lib/nodmix \
    NODMIX_CONFIG_PATH=/etc/nodmix/nodmix.json \
    NODMIX_CACHE_DIR=/opt/nodmix/cache

RUN groupadd --system --gid 10001 nodmix \
 && useradd --system --uid 10001 --gid nodmix --home-dir /var/lib/nodmix --shell /usr/sbin/nologin nodmix

WORKDIR /opt/nodmix/src
COPY pyproject.toml requirements.lock README.md ./
COPY src ./src
RUN python -m pip install --no-cache-dir -c requirements.lock ".[postgres]" \
 && nodmix sandbox install \
 && nodmix web install \
 && chmod -R a+rX /opt/nodmix/cache \
 && install -d -o nodmix -g nodmix -m 0700 /var/lib/nodmix /var/lib/nodmix/workspace \
 && install -d -m 0755 /etc/nodmix

# Numeric, so a runtime that must prove the user is not root (Kubernetes runAsNonRoot) can.
USER 10001:10001
WORKDIR /var/lib/nodmix
EXPOSE 18789
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:18789/health', timeout=2)"]
CMD ["nodmix", "gateway", "--bind", "lan"]
