// `plans.<plan>.allow`: what a plan includes. A route or model outside it is a 403 not-entitled
// (a client does not retry it, as it would a 429 `limit: 0` answered before), decided before any
// limit is charged: the route right after routing, the model once an AI route's body is read.
// Exempt callers, and callers with no plan (anonymous without plans.anonymous), are not judged.
import type { CompiledPlan } from "../config/compile.js";
import { Refusal } from "./context.js";

/** The refusal of a request for `route` under `plan`, or undefined when the plan includes it. */
export function routeEntitlement(plan: CompiledPlan | undefined, route: string): Refusal | undefined {
  const routes = plan?.allow?.routes;
  if (!routes || routes.has(route)) return undefined;
  return new Refusal(
    "not_entitled",
    "not_entitled",
    `plan "${plan.name}" does not include route "${route}"; it includes ${listed("route", [...routes])}`,
  );
}

/** The refusal of an AI request for `model` under `plan`, or undefined when the plan includes it. */
export function modelEntitlement(
  plan: CompiledPlan | undefined,
  model: string | undefined,
): Refusal | undefined {
  const models = plan?.allow?.models;
  if (!models) return undefined;
  if (model !== undefined && models.includes(model)) return undefined;
  const allowed = listed("model", models.written);
  return new Refusal(
    "not_entitled",
    "not_entitled",
    model === undefined
      ? `plan "${plan.name}" includes only some models (${allowed}) and this request names none; name its model`
      : `plan "${plan.name}" does not include model "${model}"; it includes ${allowed}`,
  );
}

/** `the routes a, b` / `the model m` / `no route at all`, capped so a long list stays readable. */
function listed(what: string, names: readonly string[]): string {
  if (names.length === 0) return `no ${what} at all`;
  const shown = names.slice(0, 20).join(", ");
  const more = names.length > 20 ? ` and ${names.length - 20} more` : "";
  return `the ${what}${names.length > 1 ? "s" : ""} ${shown}${more}`;
}
