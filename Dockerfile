# The console image. docker-compose.yml runs web (gunicorn), the Celery worker, Celery beat and the
# one-shot migration from this same image, with different commands.
FROM python:3.11-slim

# PYTHONPATH=/app: settings.py finds templates/ and static/ relative to the `console` package, so every
# process (gunicorn, celery, manage.py) must import the source tree in /app, not the copy that
# `pip install .` puts in site-packages (which has no templates/ or static/ next to it).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONPATH=/app \
    STATIC_ROOT=/app/staticfiles \
    CONSOLE_VAR_DIR=/app/var \
    WEB_CONCURRENCY=4

WORKDIR /app

RUN groupadd --system --gid 10001 console \
 && useradd --system --uid 10001 --gid console --home-dir /app --no-create-home --shell /usr/sbin/nologin console

COPY . /app
# Installs the pinned dependencies from pyproject.toml (psycopg[binary] brings its own libpq).
RUN pip install .

# collectstatic only imports settings, which refuse to load without a SECRET_KEY when DEBUG is off.
# This throwaway value exists for this one build step; the real key comes from the runtime environment.
ARG COLLECTSTATIC_SECRET_KEY=collectstatic-build-only-not-secret
RUN SECRET_KEY="$COLLECTSTATIC_SECRET_KEY" python manage.py collectstatic --noinput \
 && mkdir -p /app/var \
 && chown console:console /app/var

# Code and collected static files stay root-owned and read-only for the runtime user.
USER console

EXPOSE 8000
# Workers: WEB_CONCURRENCY (gunicorn reads it), 8 threads each: a followed workload log holds one thread, not
# a whole worker (docs/logs.md). Put a TLS-terminating proxy in front for browsers.
CMD ["gunicorn", "console.wsgi", "--bind", "0.0.0.0:8000", "--threads", "8", "--access-logfile", "-"]
