// GET /metrics: the Prometheus scrape, without a token.
import type { AdminHandler } from "../router.js";

/** The exposition text and its content type (a primary's aggregates its workers'). */
export type MetricsText = () => Promise<{ text: string; contentType: string }>;

export function metrics(metricsText: MetricsText): AdminHandler {
  return async ({ res }) => {
    const { text, contentType } = await metricsText();
    res.writeHead(200, { "content-type": contentType });
    res.end(text);
  };
}
