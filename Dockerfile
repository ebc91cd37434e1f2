# syntax=docker/dockerfile:1
# Build stage: compile TypeScript with the dev dependencies.
FROM node:22-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Runtime stage: production dependencies, the compiled code and the Lua scripts. No config: the
# image refuses to start until one is mounted at $TOLLGATE_CONFIG (docker-entrypoint.sh), since
# a default config would either accept guessable demo keys or nothing at all.
FROM node:22-slim
ENV NODE_ENV=production \
    TOLLGATE_CONFIG=/etc/tollgate/gateway.yaml \
    TOLLGATE_LISTEN=0.0.0.0:8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY lua ./lua
COPY deploy/docker-entrypoint.sh ./docker-entrypoint.sh
USER node
# 9090 is the admin listener's default port; it listens on the container's own loopback unless
# the config says otherwise (TOLLGATE_ADMIN_LISTEN=0.0.0.0:9090 with config/gateway.yaml).
EXPOSE 8080 9090
# GET /healthz on the admin listener the mounted config names (admin.listen, after ${VAR}
# substitution): the port is read from the config, never assumed.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
  CMD ["node", "/app/dist/admin/healthcheck.js", "/healthz"]
ENTRYPOINT ["/bin/sh", "/app/docker-entrypoint.sh"]
