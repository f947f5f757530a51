#!/usr/bin/env bash
# Creates deploy/codeagent.env with fresh random secrets (mode 0600). Refuses to overwrite one:
# the database password and SECRETS_KEY must stay what they were once data exists.
#   deploy/make-env.sh [admin email]
set -euo pipefail
out="$(dirname "$0")/codeagent.env"
[ -e "$out" ] && { echo "$out exists; keep it (move it away first to start over)" >&2; exit 1; }
rand() { openssl rand -base64 "$1" | tr -d '\n/+=' ; }
pg=$(rand 24); s3=$(rand 30)
umask 077
cat > "$out" <<ENV
POSTGRES_PASSWORD=$pg
DATABASE_URL=postgres://codeagent:$pg@postgres:5432/codeagent
MINIO_ROOT_USER=codeagent
MINIO_ROOT_PASSWORD=$s3
S3_ACCESS_KEY_ID=codeagent
S3_SECRET_ACCESS_KEY=$s3
INTERNAL_SERVICE_TOKEN=$(rand 32)
JWT_SECRET=$(rand 48)
ADMIN_TOKENS=$(rand 32)
SECRETS_KEY=$(openssl rand -base64 32)
AGENT_TOKEN=$(rand 32)
BOOTSTRAP_ADMIN_EMAIL=${1:-admin@example.com}
BOOTSTRAP_ADMIN_PASSWORD=$(rand 18)
TRUSTED_PROXIES=
ENV
echo "wrote $out (mode 0600); the administrator's password is BOOTSTRAP_ADMIN_PASSWORD in it" >&2
