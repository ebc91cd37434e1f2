// A compiled plan and the clients on it: what identity gives a caller and the limiter decides by.
// The compiled model's types live in model/ (config/compile.ts builds them), so identity and the
// limiter know what a plan is without importing the config compiler.
import type { PlannedLimit } from "../limits/plan.js";

/** `plans.<plan>.allow`: what the plan includes; undefined members allow everything. */
export interface Entitlements {
  routes: ReadonlySet<string> | undefined;
  /** The patterns as written (for answers), and a test of a model against them. */
  models: { readonly written: readonly string[]; includes(model: string): boolean } | undefined;
}

export interface CompiledPlan {
  name: string;
  /** `allow`; undefined: the plan includes every route and model. */
  allow?: Entitlements | undefined;
  /**
   * Limits of this plan for each route name, global and tenant limits included. Each list is
   * built on first use and then kept (one list per plan and route, always the same object), so
   * compiling many plans times many routes costs nothing until traffic needs a pair.
   */
  limitsByRoute: ReadonlyMap<string, readonly PlannedLimit[]>;
  /** Every limit of the plan once: global, tenant and each route's own. */
  limits: readonly PlannedLimit[];
}

export interface CompiledClient {
  id: string;
  plan: CompiledPlan;
  tenant: string | undefined;
}
