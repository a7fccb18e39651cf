/**
 * The startup guard (`src/startup.ts`) on the installed SDK: two first calls that reach a fresh
 * instance together start it once, and without the guard the SDK's own start runs twice (the
 * race that made `reattach-after-parent-restart` vary from play to play). A startup is counted
 * by the SDK's fiber recovery check, which each run of its startup makes once.
 * `tests/differential/test_startup.py` runs this file alone.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";

interface Probe {
  onStart(props?: unknown): unknown;
  sdkOnStart?: (props?: unknown) => unknown;
  _checkRunFibers(): Promise<void>;
  __unsafe_ensureInitialized(): Promise<void>;
}

/** How often a fresh Counter ran the SDK's startup when two first calls reached it together;
 * `unguarded` puts the SDK's own start back first. */
async function startups(name: string, unguarded: boolean): Promise<number> {
  const namespace = (env as unknown as Record<string, DurableObjectNamespace>).Counter;
  const stub = namespace.get(namespace.idFromName(name));
  return runInDurableObject(stub, async (instance: unknown) => {
    const agent = instance as Probe;
    if (unguarded) agent.onStart = agent.sdkOnStart as Probe["onStart"];
    let runs = 0;
    const check = agent._checkRunFibers.bind(agent);
    agent._checkRunFibers = async () => {
      runs += 1;
      await check();
    };
    await Promise.all([agent.__unsafe_ensureInitialized(), agent.__unsafe_ensureInitialized()]);
    // A later call finds it started.
    await agent.__unsafe_ensureInitialized();
    return runs;
  });
}

describe("startup", () => {
  it("two first calls start an instance once", async () => {
    expect(await startups("startup-guarded", false)).toBe(1);
  });

  it("without the guard the SDK starts it twice", async () => {
    expect(await startups("startup-unguarded", true)).toBe(2);
  });
});
