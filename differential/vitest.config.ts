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

// workerd evicts an object idle for some seconds of real time on its own, and the next access
// (the runner's own, to evict it as the port did) then builds an incarnation the port never had.
// The plan scripts every eviction, so none may happen behind its back: each binding keeps the
// class and storage wrangler.jsonc gives it, and is never evicted for inactivity.
const wrangler = JSON.parse(readFileSync("./wrangler.jsonc", "utf8")) as {
  durable_objects: { bindings: { name: string; class_name: string }[] };
  migrations: { new_sqlite_classes?: string[] }[];
};
const sqlite = new Set(wrangler.migrations.flatMap((m) => m.new_sqlite_classes ?? []));
const durableObjects = Object.fromEntries(
  wrangler.durable_objects.bindings.map((b) => [
    b.name,
    { className: b.class_name, useSQLite: sqlite.has(b.class_name), unsafePreventEviction: true }
  ])
);

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.jsonc" },
      miniflare: { bindings: { PLANS: plans }, durableObjects }
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
