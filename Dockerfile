# syntax=docker/dockerfile:1
#
# One image for every Threadwork service. Build it from the repository root:
#
#   docker build -t threadwork .
#
# The entrypoint is `tini -- node`; the command names the script to run, so the arguments pick the
# service (the default is the gateway):
#
#   docker run threadwork                                       # services/gateway/dist/main.js
#   docker run threadwork services/runs/dist/main.js            # any services/<name>/dist/main.js
#   docker run threadwork services/gateway/dist/admin.js keys create --user alice
#
# Configuration is environment variables only (README "Configuration"). The image sets
# NODE_ENV=production, which makes the gateway require SESSION_SECRET.

# The Node of `.node-version` (test/deploy/dockerfile.test.ts keeps them equal): the LTS line the
# local stack and the tests run on too.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# ---------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build

# The pnpm of package.json's `packageManager` (test/deploy/dockerfile.test.ts keeps them equal).
# Installed with npm rather than corepack: corepack's signature keys lag behind new pnpm releases.
ARG PNPM_VERSION=10.34.8
RUN npm install --global --no-fund --no-audit --loglevel=error pnpm@${PNPM_VERSION}
ENV CI=true

WORKDIR /src

# Fetch every locked package into the store first: this layer only changes with the lockfile
# (and the patches of dependencies, which pnpm wants at hand from the fetch on).
# (--prefer-offline below, not --offline: the store is a cache mount, which BuildKit may have
# emptied while this layer stayed cached.)
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY patches ./patches
RUN --mount=type=cache,id=threadwork-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm fetch

COPY . .

# Compile the services and the libraries they run on (tsc, per package's tsconfig.build.json),
# then the web console (its API types come from the gateway just built; Vite writes console/dist).
RUN --mount=type=cache,id=threadwork-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm install --prefer-offline --frozen-lockfile \
 && pnpm --filter-prod "{./services/*}..." run build \
 && pnpm --filter @threadwork/console run build

# The runtime tree: production dependencies of the services only (no test, bench or dev tooling),
# then each selected package's manifest, compiled output and links into /out. The runner's
# dependencies bring the Codex CLI with its native binary for this platform. The console is static
# files only: the gateway serves /app/console/dist (its CONSOLE_DIR default) at `/`.
RUN --mount=type=cache,id=threadwork-pnpm-store,target=/root/.local/share/pnpm/store \
    find . -name node_modules -type d -prune -exec rm -rf {} + \
 && pnpm install --prefer-offline --frozen-lockfile --prod --filter-prod "{./services/*}..." \
 && mkdir -p /out/console \
 && cp -a console/dist /out/console/ \
 && cp -a package.json node_modules /out/ \
 && pnpm --filter-prod "{./services/*}..." exec sh -c \
      'dest="/out/${PWD#/src/}" && mkdir -p "$dest" && cp -a package.json dist node_modules "$dest/" \
        && if [ -d jail ]; then cp -a jail "$dest/"; fi' \
 && find /out -name '*.tsbuildinfo' -delete

# ---------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime

# tini: PID 1 that forwards signals (graceful shutdown) and reaps the harness's children.
# git: the runner clones, commits and pushes workspaces; ca-certificates for HTTPS remotes;
# bubblewrap: the jail around each sandbox's harness (the runner's SANDBOX_JAIL, `required` here).
RUN apt-get update \
 && apt-get install --yes --no-install-recommends tini git ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/*

# A fixed, non-root identity (the Helm chart's runAsUser/fsGroup match it). The data folders exist
# and belong to it so that a volume mounted there starts writable: runner sandboxes (SANDBOX_ROOT)
# and the local provider's bare repositories (REPOHOST_LOCAL_DIR in deploy/compose).
RUN groupadd --system --gid 10001 threadwork \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/threadwork --create-home \
      --shell /usr/sbin/nologin threadwork \
 && mkdir -p /var/lib/threadwork/sandboxes /var/lib/threadwork/repos \
 && chown -R 10001:10001 /var/lib/threadwork

ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    SANDBOX_ROOT=/var/lib/threadwork/sandboxes

WORKDIR /app
# Owned by root and read-only to the service user: code cannot be rewritten at run time.
COPY --from=build /out/ /app/

USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["tini", "--", "node"]
CMD ["services/gateway/dist/main.js"]
