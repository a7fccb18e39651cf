/**
 * Runs the step runner (`test/play.test.ts`) in workerd with the plans `agentsim diff` wrote:
 * the file named by AGENTSIM_DIFF_PLANS becomes the text binding PLANS, and the reporter
 * (`reporter.ts`) writes every play's records to the file named by AGENTSIM_DIFF_OUT.
 */
import { readFileSync } from "node:fs";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";
import PlayReporter from "./reporter.ts";

const plansPath = process.env.AGENTSIM_DIFF_PLANS;
const plans = plansPath ? readFileSync(plansPath, "utf8") : '{"plans": []}';

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.jsonc" },
      miniflare: { bindings: { PLANS: plans } }
    })
  ],
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    teardownTimeout: 60_000,
    reporters: ["dot", new PlayReporter()]
  }
});
