# syntax=docker/dockerfile:1
# The base image: node:22-slim from Docker Hub. Where no registry can be reached, make a local
# stand-in with deploy/make-base-image.sh and build with --build-arg NODE_IMAGE=<its name>
# (docs/deployment.md: "Building without a registry").
ARG NODE_IMAGE=node:22-slim

# Build stage: compile TypeScript with the dev dependencies.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# Without the docs generator's modules, which package.json's "files" leaves out too.
RUN npm run build && rm -f dist/config/docs.* dist/config/docs-keyed.*

# Runtime stage: production dependencies and what package.json's "files" ships: the compiled
# code, the Lua scripts, the admin console's files and the config schema. No config: the
# image refuses to start until one is mounted at $TOLLGATE_CONFIG (docker-entrypoint.sh), since
# a default config would either accept guessable demo keys or nothing at all.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    TOLLGATE_CONFIG=/etc/tollgate/gateway.yaml \
    TOLLGATE_LISTEN=0.0.0.0:8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY lua ./lua
COPY console ./console
COPY proto ./proto
COPY config/gateway.schema.json ./config/gateway.schema.json
COPY deploy/docker-entrypoint.sh ./docker-entrypoint.sh
COPY deploy/demo-keys.mjs ./deploy/demo-keys.mjs
# node:*-slim's user node, by number: a runtime can then see from the image alone that it is not
# root (Kubernetes' runAsNonRoot refuses a named user it cannot resolve without runAsUser), and
# it is deploy/kubernetes/deployment.yaml's runAsUser. The files above stay root's, read-only to
# it; the gateway writes no file, so the image runs on a read-only root filesystem with no tmpfs
# at all (deploy/check-image.sh checks that /tmp is not writable either).
USER 1000:1000
# 9090 is the admin listener's default port; it listens on the container's own loopback unless
# the config says otherwise (TOLLGATE_ADMIN_LISTEN=0.0.0.0:9090 with config/gateway.yaml).
EXPOSE 8080 9090
# GET /healthz on the admin listener the mounted config names (admin.listen, after ${VAR}
# substitution): the port is read from the config, never assumed.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
  CMD ["node", "/app/dist/admin/healthcheck.js", "/healthz"]
ENTRYPOINT ["/bin/sh", "/app/docker-entrypoint.sh"]
