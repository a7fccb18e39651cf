/**
 * `ToolsWorkload`, the parent of the `workload: tools` player on the real SDK
 * (`scenarios/workloads/tools.py` in the port): it runs the scenario's `RunPlan`s as agent tools
 * of `ScriptedToolChild` (`scripted-child.ts`). It is not a second hand-written story: it reads
 * the run plans from its options, the port's `RunPlan` values as the plan compiler exported them,
 * and does with them what the port's parent does (the same tables, rows and `workload:*`
 * records), so the two sides compare one to one.
 */
import type { Json } from "../harness";
import { HarnessAgent } from "./base";
import { ChatToolChild } from "./chat-child";
import { ScriptedToolChild, now } from "./scripted-child";

interface DetachedPlan {
  on_finish: boolean;
  max_budget_ms: number | null;
  no_progress_budget_ms: number | null;
  notify: boolean;
  on_milestones: string[];
  milestone_mode: string;
  on_finish_work_ms: number;
  on_finish_fails: number;
}

interface RunPlan {
  run_id: string;
  child: string;
  detached: DetachedPlan | null;
  steps: Json[][];
  input: string;
  resume: boolean;
  brief?: string | null;
}

const ON_FINISH_METHOD = "workload_on_finish";

/** A scripted child's input: its script, and the run's brief when it has one (key order as
 * the port's, so that both previews of the input's JSON are one text). */
function scriptedInput(plan: RunPlan): Json {
  const script: { [key: string]: Json } = { steps: plan.steps, resume: plan.resume };
  if (plan.brief !== undefined && plan.brief !== null) script.brief = plan.brief;
  return script;
}

const PARENT_DDL = [
  "CREATE TABLE IF NOT EXISTS workload_dispatched (run_id TEXT PRIMARY KEY, at_ms INTEGER)",
  "CREATE TABLE IF NOT EXISTS workload_finishes (run_id TEXT NOT NULL, status TEXT NOT NULL, " +
    "at_ms INTEGER NOT NULL)"
];
const CALLS_DDL =
  "CREATE TABLE IF NOT EXISTS workload_finish_calls (run_id TEXT NOT NULL, status TEXT, " +
  "at_ms INTEGER NOT NULL)";

function flaky(detached: DetachedPlan | null): boolean {
  return !!detached && detached.on_finish && (detached.on_finish_work_ms > 0 || detached.on_finish_fails > 0);
}

/** The port's `DetachedPlan.option()`, in the SDK's spelling. */
function detachedOption(detached: DetachedPlan | null): Record<string, Json> | undefined {
  if (detached === null) return undefined;
  const out: Record<string, Json> = {};
  if (detached.on_finish) out.onFinish = ON_FINISH_METHOD;
  if (detached.notify) out.notify = true;
  if (detached.max_budget_ms !== null) out.maxBudgetMs = detached.max_budget_ms;
  if (detached.no_progress_budget_ms !== null) out.noProgressBudgetMs = detached.no_progress_budget_ms;
  if (detached.on_milestones.length) {
    out.onMilestones = { names: detached.on_milestones, mode: detached.milestone_mode };
  }
  return out;
}

/** What a tools parent needs of its base: `HarnessAgent`'s helpers and the SDK's agent-tool
 * calls (a chat host's base, `HarnessedChatAgent` in `chat-host.ts`, has them too). */
// biome-ignore lint: the bases are the SDK's Agent and AIChatAgent, typed loosely here
type ParentBase = abstract new (ctx: DurableObjectState, env: unknown) => any;

/** The tools parent on `Base`: a plain agent (`ToolsWorkload`) or a chat host
 * (`AiChatToolsWorkload`), as the port's `_ToolsMixin` sits on either. */
export function toolsParent<TBase extends ParentBase>(Base: TBase) {
  abstract class ToolsParent extends Base {
    // biome-ignore lint: the mixin's constructor takes what every agent takes
    constructor(...args: any[]) {
      super(args[0], args[1]);
      for (const statement of PARENT_DDL) this.exec(statement);
      if (this.runs.some((plan) => flaky(plan.detached))) this.exec(CALLS_DDL);
    }

    get runs(): RunPlan[] {
      return this.opt("runs", []) as unknown as RunPlan[];
    }

    async onStart(): Promise<void> {
      if (this.opt("start_on", "call") !== "on_start") return;
      for (const plan of this.runs) {
        const done = this.exec("SELECT 1 AS x FROM workload_dispatched WHERE run_id = ?", plan.run_id);
        if (!done.length) this.ctx.waitUntil(this.dispatchOne(plan).catch(() => undefined));
      }
    }

    async dispatch(runId: string | null = null): Promise<Json[]> {
      const plans = this.runs.filter((plan) => runId === null || plan.run_id === runId);
      if (!plans.length) {
        const known = this.runs.map((plan) => `'${plan.run_id}'`).join(", ");
        throw new Error(`no run '${runId}'; this workload's runs: [${known}]`);
      }
      return Promise.all(plans.map((plan) => this.dispatchOne(plan)));
    }

    async cancel(runId: string, reason = "cancelled by the scenario"): Promise<void> {
      await this.cancelAgentTool(runId, reason);
    }

    async dispatchOne(plan: RunPlan): Promise<Json> {
      this.exec(
        "INSERT OR IGNORE INTO workload_dispatched (run_id, at_ms) VALUES (?, ?)",
        plan.run_id,
        now()
      );
      const input = plan.child === "scripted" ? scriptedInput(plan) : (plan.input as Json);
      const child = plan.child === "chat" ? ChatToolChild : ScriptedToolChild;
      const result = await this.runAgentTool(child as never, {
        input,
        runId: plan.run_id,
        detached: detachedOption(plan.detached) as never
      });
      return JSON.parse(JSON.stringify(result)) as Json;
    }

    async workload_on_finish(run: { runId: string }, lifecycle: { status?: string } | null) {
      const status = lifecycle && typeof lifecycle === "object" ? (lifecycle.status ?? null) : null;
      const detached = this.runs.find((p) => p.run_id === run.runId)?.detached ?? null;
      if (detached && flaky(detached)) {
        if (detached.on_finish_work_ms > 0) await this.pause(detached.on_finish_work_ms);
        this.exec(
          "INSERT INTO workload_finish_calls (run_id, status, at_ms) VALUES (?, ?, ?)",
          run.runId,
          status,
          now()
        );
        const calls = Number(
          this.exec("SELECT COUNT(*) AS n FROM workload_finish_calls WHERE run_id = ?", run.runId)[0].n
        );
        if (calls <= detached.on_finish_fails) {
          this.trace("workload:on_finish_failed", { runId: run.runId, status, call: calls });
          throw new Error(
            `on_finish of run ${run.runId} failed its call ${calls} ` +
              `(on_finish_fails: ${detached.on_finish_fails})`
          );
        }
      }
      this.exec(
        "INSERT INTO workload_finishes (run_id, status, at_ms) VALUES (?, ?, ?)",
        run.runId,
        status,
        now()
      );
      this.trace("workload:on_finish", { runId: run.runId, status });
    }
  }
  return ToolsParent;
}

export class ToolsWorkload extends toolsParent(HarnessAgent) {}
