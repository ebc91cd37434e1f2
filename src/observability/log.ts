// JSON lines on stdout (pino). Credentials are redacted by path in case a future log call ever
// carries headers; request logs name the client id, never its key.
import { type Logger, pino, destination as pinoDestination } from "pino";

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: "tollgate" },
      redact: {
        paths: [
          "headers.authorization",
          "headers['x-api-key']",
          "*.headers.authorization",
          "token",
          "*.token",
          "key",
          "*.key",
        ],
        censor: "[redacted]",
      },
    },
    destination ?? pinoDestination({ dest: 1, sync: true }),
  );
}
