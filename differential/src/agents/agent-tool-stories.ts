/**
 * The library agents of the agents-as-tools stories (`scenarios/library_agents/parents.py` and
 * `children.py` in the port), on the real SDK. `StoryParent` runs scripted children awaited or
 * detached and notes every hook it gets; `StoryChild` is the shared script player
 * (`ScriptedToolChild`, `tools.ts`) with story notes and the stories' extra steps (`reset`,
 * `await-approval`, `fan-out`); `StubbornChild` refuses every cancel; `MiddleChild` is itself a
 * parent with a cap of one concurrent agent tool. The scripts come from the scenario's calls,
 * so the children are not written per story; the parent's methods and notes follow the port's
 * line for line, so that `story:*` records and `story_log` rows compare one to one.
 */
import type { Agent } from "agents";
import { type Json, dropTimers, shared } from "../harness";
import { ScriptedToolChild, deferred, type Deferred } from "./scripted-child";
import { HarnessAgent } from "./base";

const APPROVALS_DDL = "CREATE TABLE IF NOT EXISTS child_approvals (run_id TEXT PRIMARY KEY)";

/** The port's `detached=` option (snake_case keys, or `true`) in the SDK's spelling. */
function detachedOption(detached: Json): Json {
  if (detached === null || typeof detached !== "object" || Array.isArray(detached)) return detached;
  const names: Record<string, string> = {
    on_finish: "onFinish",
    max_budget_ms: "maxBudgetMs",
    no_progress_budget_ms: "noProgressBudgetMs",
    on_milestones: "onMilestones",
    notify: "notify"
  };
  const out: Record<string, Json> = {};
  for (const [key, value] of Object.entries(detached)) out[names[key] ?? key] = value;
  return out;
}

interface RunResult {
  runId: string;
  status: string;
  summary?: string;
  error?: string;
  reason?: string;
  childStillRunning?: boolean;
}

/** Whether a result that is not `completed` may be sent again (`failure_envelope`). */
function retryable(result: RunResult): boolean | null {
  if (result.status === "completed") return null;
  return result.status === "interrupted";
}

export class StoryChild extends ScriptedToolChild {
  private readonly approvals = new Map<string, Deferred>();

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    this.exec(APPROVALS_DDL);
  }

  protected override resumeRun(runId: string, steps: Json[][]): void {
    this.note("child-resumed", { run: runId });
    super.resumeRun(runId, steps);
  }

  async onRequest(_request: Request): Promise<Response> {
    const rows = this.exec("SELECT status FROM child_runs WHERE run_id = ?", this.name);
    return Response.json({ run: this.name, status: rows.length ? rows[0].status : null });
  }

  override async cancelAgentToolRun(runId: string, reason?: unknown): Promise<void> {
    if (this.cancelRun(runId, reason)) {
      const why = reason === undefined || reason === null ? null : String(reason);
      this.note("child-cancelled", { run: runId, reason: why });
    }
  }

  async approve(runId: string): Promise<void> {
    this.exec(
      "INSERT OR IGNORE INTO child_approvals SELECT run_id FROM child_runs WHERE run_id = ?",
      runId
    );
    const waiter = this.approvals.get(runId);
    this.approvals.delete(runId);
    waiter?.resolve();
  }

  protected override async step(runId: string, index: number, step: Json[]): Promise<boolean> {
    const kind = step[0];
    if (kind === "reset") {
      this.advance(runId, index);
      await this.ctx.storage.sync(); // the cursor is durable before the isolate goes
      this.note("child-reset", { run: runId });
      await this.ctx.storage.sync();
      // The isolate resets on its own (its parent lives): its sleeps never fire again.
      dropTimers(this.instanceKey);
      shared().live.set(this.instanceKey, false);
      this.ctx.abort("reset");
      return false;
    }
    if (kind === "await-approval") {
      while (!this.exec("SELECT 1 AS x FROM child_approvals WHERE run_id = ?", runId).length) {
        const waiter = deferred();
        this.approvals.set(runId, waiter);
        await this.waitFor(runId, waiter.promise);
        if (!this.stops.has(runId)) return false; // settled while waiting (a cancel)
      }
      return true;
    }
    if (kind === "fan-out") {
      const count = Number(step[1]);
      const steps = step[2] as Json[][];
      const runs = Array.from({ length: count }, (_, i) =>
        this.runAgentTool(StoryChild as never, { input: { steps }, runId: `${runId}-g${i}` })
      );
      for (const result of (await Promise.all(runs)) as RunResult[]) {
        this.note("grandchild", {
          run: result.runId,
          status: result.status,
          error: result.error ?? null
        });
      }
      return true;
    }
    return super.step(runId, index, step);
  }

  /** Even a sleep with nothing left yields once (the port's story child always waits). */
  protected override async pauseFor(runId: string, remainingMs: number): Promise<void> {
    await this.waitFor(runId, this.pause(Math.max(0, remainingMs)));
  }
}

export class StubbornChild extends StoryChild {
  override async cancelAgentToolRun(_runId: string, _reason?: unknown): Promise<void> {
    throw new Error("this child cannot be cancelled");
  }
}

export class MiddleChild extends StoryChild {
  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    this.maxConcurrentAgentTools = 1;
  }
}

const CHILDREN: Record<string, typeof Agent> = {
  StoryChild: StoryChild as unknown as typeof Agent,
  StubbornChild: StubbornChild as unknown as typeof Agent,
  MiddleChild: MiddleChild as unknown as typeof Agent
};

function childClass(name: string): never {
  const cls = CHILDREN[name];
  if (!cls) throw new Error(`no story child ${name}`);
  return cls as never;
}

export class StoryParent extends HarnessAgent {
  async dispatch(
    runId: string,
    steps: Json[][],
    detached: Json = true,
    child = "StoryChild"
  ): Promise<string> {
    const handle = (await this.runAgentTool(childClass(child), {
      input: { steps },
      runId,
      detached: detachedOption(detached) as never
    })) as RunResult;
    this.note("dispatched", { run: runId, status: handle.status });
    return handle.status;
  }

  async run_awaited(
    runId: string,
    steps: Json[][],
    retries = 0,
    child = "StoryChild"
  ): Promise<Json> {
    let result: RunResult = { runId, status: "error" };
    for (let attempt = 0; attempt <= retries; attempt++) {
      result = (await this.runAgentTool(childClass(child), { input: { steps }, runId })) as RunResult;
      const again = retryable(result);
      this.note("attempt", {
        run: runId,
        attempt,
        status: result.status,
        retryable: again,
        summary: result.summary ?? null
      });
      if (!again) break;
    }
    return JSON.parse(JSON.stringify(result)) as Json;
  }

  async run_in_parallel(runIds: string[], steps: Json[][], child = "StoryChild"): Promise<string[]> {
    const results = (await Promise.all(
      runIds.map((runId) => this.runAgentTool(childClass(child), { input: { steps }, runId }))
    )) as RunResult[];
    for (const result of results) {
      this.note("attempt", {
        run: result.runId,
        attempt: 0,
        status: result.status,
        retryable: null,
        summary: result.summary ?? null,
        error: result.error ?? null
      });
    }
    return results.map((result) => result.status);
  }

  async cancel(runId: string): Promise<void> {
    await this.cancelAgentTool(runId);
  }

  async clear(statuses: string[] | null = null): Promise<number> {
    // The port's clear_agent_tool_runs returns how many runs it cleared; the SDK's returns
    // nothing, so the story counts them itself.
    const before = this.runCount();
    await this.clearAgentToolRuns(statuses === null ? undefined : { status: statuses as never });
    const cleared = before - this.runCount();
    this.note("cleared", { count: cleared });
    return cleared;
  }

  private runCount(): number {
    return Number(this.exec("SELECT COUNT(*) AS n FROM cf_agent_tool_runs")[0].n);
  }

  override async onAgentToolFinish(run: { runId: string }, result: RunResult): Promise<void> {
    this.note("finish", { run: run.runId, status: result.status, reason: result.reason ?? null });
  }

  async on_done(run: { runId: string }, result: RunResult): Promise<void> {
    this.note("on-finish", {
      run: run.runId,
      status: result.status,
      reason: result.reason ?? null,
      still_running: result.childStillRunning ?? null
    });
  }

  override async onProgress(
    run: { runId: string },
    progress: { fraction?: number; milestone?: string }
  ): Promise<void> {
    this.note("progress", {
      run: run.runId,
      fraction: progress.fraction ?? null,
      milestone: progress.milestone ?? null
    });
  }

  override async onBeforeSubAgent(
    _request: Request,
    child: { className: string; name: string }
  ): Promise<Response | undefined> {
    if (!this.hasAgentToolRun(child.className, child.name)) {
      this.note("drill-in", { child: child.className, run: child.name, allowed: false });
      return new Response("Not found", { status: 404 });
    }
    this.note("drill-in", { child: child.className, run: child.name, allowed: true });
    return undefined;
  }
}



export class SlowFinishParent extends StoryParent {
  /** Its `on_done` takes `handler_ms` and notes when it begins and ends, so that a restart in
   * the middle of a delivery shows (S8: at least once across a crash). */
  override async on_done(run: { runId: string }, result: RunResult): Promise<void> {
    this.note("on-finish-begin", { run: run.runId, status: result.status });
    await this.pause(this.opt("handler_ms", 2_000) as number);
    this.note("on-finish-end", { run: run.runId, status: result.status });
  }
}
