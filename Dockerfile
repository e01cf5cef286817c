# syntax=docker/dockerfile:1
# Build stage: the same commands as the README and .ci/run (npm ci, npm run build).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: package.json's `prepare` builds, and the sources come in the next layers (the
# build runs below); no dependency's install script is allowed anyway (package.json allowScripts).
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json ./
COPY src ./src
COPY workers ./workers
COPY bench ./bench
RUN npm run build && npm prune --omit=dev

# Runtime stage: compiled code and production dependencies only, as the unprivileged `node` user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY samples ./samples
RUN mkdir -p /data && chown node:node /data
USER node
ENTRYPOINT ["node", "bin/vqb.js"]
CMD ["work"]
