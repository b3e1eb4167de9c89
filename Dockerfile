# The reference service as an image: `docker compose up` runs several replicas of it (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    MCPFUSION_DB_PATH=/data/billing.sqlite3

WORKDIR /srv
COPY pyproject.toml README.md ./
COPY mcpfusion ./mcpfusion
COPY app ./app
COPY routers ./routers
COPY presenters ./presenters
COPY models ./models
# The library with its extras, plus the reference service's own dependencies (a dependency group).
RUN pip install --upgrade 'pip>=25.1' && pip install '.[all]' --group service && mkdir -p /data && useradd --system --home /srv mcpfusion && chown mcpfusion /data
USER mcpfusion

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]
CMD ["mcpfusion", "serve", "app.main:app", "--host", "0.0.0.0", "--port", "8000"]
