/**
 * The generic step runner: plays each plan of `PLANS` (a JSON text binding the vitest config
 * reads from the file `agentsim diff` wrote) on the real SDK in workerd, `repeat` times, and
 * hands each play's records and final tables to the reporter through the test's `meta`.
 *
 * A plan is a list of timed actions the Python side compiled from a scenario and its agentsim
 * run: calls, requests, evictions (scripted ones and those the simulator drew by itself) and
 * alarm snapshots. Between two actions the runner moves virtual time forward, firing the agent
 * sleeps and armed alarms that fall due in time order, each followed by a quiet-period wait
 * (no record, timer or alarm change for a few real milliseconds) instead of a fixed sleep.
 */
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { getAgentByName } from "agents";
import { describe, it } from "vitest";
import {
  type Json,
  type TraceRecord,
  dropTimers,
  fireTimer,
  installVirtualDate,
  nextTimer,
  record,
  resetRun,
  shared,
  subscribeChannels
} from "../src/harness";

interface AgentPlan {
  class: string;
  options: Record<string, Json>;
}

interface Action {
  t: number;
  step?: number;
  do: "call" | "request" | "evict" | "snapshot" | "connect" | "disconnect" | "send";
  client?: string;
  message?: Json;
  code?: number;
  reason?: string;
  agent?: string;
  method?: string;
  args?: Json[];
  wait?: boolean;
  http_method?: string;
  path?: string;
  body?: Json;
  headers?: Record<string, string>;
  label?: string;
}

interface Plan {
  name: string;
  repeat: number;
  end_ms: number;
  agents: Record<string, AgentPlan>;
  actions: Action[];
}

interface PlayResult {
  records: TraceRecord[];
  tables: Record<string, Record<string, Record<string, Json>[]>>;
  errors: string[];
}

type Stub = DurableObjectStub & Record<string, (...args: unknown[]) => Promise<unknown>>;

const QUIET_ROUND_MS = 5;
/** Quiet rounds in a row (no record, timer, alarm change or constructed instance) that end a
 * wait, once no started work is still unaccounted for. */
const QUIET_ROUNDS = 6;
/** A wait gives up after this many rounds (10 s), whatever is still running. */
const SETTLE_ROUNDS_MAX = 2000;

/** Calls, requests and alarm handlers the runner started and that have not finished, each
 * with the timer sequence number when it started: one that has not registered a virtual
 * timer since may still be working (a new incarnation's startup can take a long time on a
 * busy machine), one that has is parked on virtual time. */
const inFlight = new Set<{ timerSeq: number }>();

function working(): boolean {
  const seq = shared().seq;
  for (const entry of inFlight) if (entry.timerSeq === seq) return true;
  return false;
}

function realPause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Wait until nothing happens for `QUIET_ROUNDS` rounds in a row and every piece of work the
 * runner started has finished or is parked on a virtual timer. */
async function settle(): Promise<void> {
  const state = shared();
  let last = -1;
  let quiet = 0;
  for (let round = 0; round < SETTLE_ROUNDS_MAX; round++) {
    await realPause(QUIET_ROUND_MS);
    const mark = state.activity + state.records.length * 7 + state.timers.length * 13;
    if (mark === last) quiet += 1;
    else {
      quiet = 0;
      last = mark;
    }
    if (quiet >= QUIET_ROUNDS && !working()) return;
  }
}

class Player {
  private readonly stubs = new Map<string, Stub>();
  private readonly keys = new Map<string, string>();
  private readonly clients = new Map<string, WebSocket>();
  readonly errors: string[] = [];

  constructor(
    private readonly plan: Plan,
    private readonly suffix: string
  ) {}

  doName(alias: string): string {
    return `${alias}${this.suffix}`;
  }

  private namespace(alias: string): DurableObjectNamespace {
    const agent = this.plan.agents[alias];
    if (!agent) throw new Error(`plan ${this.plan.name}: no agent ${alias}`);
    const binding = (env as unknown as Record<string, DurableObjectNamespace>)[agent.class];
    if (!binding) throw new Error(`plan ${this.plan.name}: no binding for class ${agent.class}`);
    return binding;
  }

  /** The stub of `alias`, got once (`getAgentByName` runs startup, as the port's `get`). */
  private async stub(alias: string): Promise<Stub> {
    let stub = this.stubs.get(alias);
    if (!stub) {
      const namespace = this.namespace(alias);
      this.keys.set(alias, namespace.idFromName(this.doName(alias)).toString());
      stub = (await getAgentByName(namespace as never, this.doName(alias))) as unknown as Stub;
      this.stubs.set(alias, stub);
    }
    return stub;
  }

  private keyAlias(key: string): string | undefined {
    for (const [alias, k] of this.keys) if (k === key) return alias;
    return undefined;
  }

  /** Fire timers and alarms due at or before `t`, earliest first; `stop` ends it early. */
  async advanceTo(t: number, stop?: () => boolean): Promise<void> {
    const state = shared();
    for (;;) {
      if (stop?.()) return;
      const timer = nextTimer();
      let alarmKey: string | null = null;
      let alarmAt = Number.POSITIVE_INFINITY;
      for (const [key, at] of state.alarms) {
        if (at !== null && at < alarmAt && this.keyAlias(key) !== undefined) {
          alarmAt = at;
          alarmKey = key;
        }
      }
      const timerAt = timer ? timer.due : Number.POSITIVE_INFINITY;
      const due = Math.min(timerAt, alarmAt);
      if (due > t) break;
      state.now = Math.max(state.now, due);
      if (timer && timerAt <= alarmAt) {
        fireTimer(timer);
      } else if (alarmKey !== null) {
        state.alarms.set(alarmKey, null);
        const alias = this.keyAlias(alarmKey) as string;
        const stub = await this.stub(alias);
        this.track(runDurableObjectAlarm(stub), `alarm of ${alias}`);
      }
      await settle();
    }
    state.now = Math.max(state.now, t);
  }

  private track(
    promise: Promise<unknown>,
    what: string,
    reply?: (ok: boolean, value: unknown) => void
  ): { done: boolean } {
    const status = { done: false };
    const entry = { timerSeq: shared().seq };
    inFlight.add(entry);
    shared().activity += 1;
    void promise.then(
      (value: unknown) => {
        status.done = true;
        inFlight.delete(entry);
        shared().activity += 1;
        reply?.(true, value);
      },
      (error: unknown) => {
        status.done = true;
        inFlight.delete(entry);
        shared().activity += 1;
        this.errors.push(`${what}: ${String(error)}`);
        reply?.(false, null);
      }
    );
    return status;
  }

  async perform(action: Action): Promise<void> {
    const alias = action.agent as string;
    if (action.do === "snapshot") {
      for (const name of Object.keys(this.plan.agents)) {
        const key = this.keys.get(name);
        const at = key === undefined ? null : (shared().alarms.get(key) ?? null);
        record(this.doName(name), "harness:alarm", { at, step: action.label ?? null });
      }
      return;
    }
    if (action.do === "evict") {
      const stub = this.stubs.get(alias);
      const key = this.keys.get(alias);
      if (stub && key && shared().live.get(key)) {
        // Kill, never unwind: the instance is reset at once (in-flight calls fail), and its
        // pending sleeps never fire. `evictDurableObject` would wait for in-flight work.
        dropTimers(key);
        shared().live.set(key, false);
        try {
          await runInDurableObject(stub, (_instance: unknown, state) => state.abort("evicted"));
        } catch {
          // abort() throws to unwind the call that asked for it
        }
        // A stub of an aborted object stays broken; callers of the real platform hold a stub
        // obtained before the eviction, whose next call is a plain RPC (no startup): a plain
        // `get` stub is that.
        const namespace = this.namespace(alias);
        this.stubs.set(alias, namespace.get(namespace.idFromName(this.doName(alias))) as Stub);
      }
      return;
    }
    if (action.do === "disconnect" || action.do === "send") {
      const socket = this.clients.get(action.client as string);
      if (!socket) {
        this.errors.push(`${action.do} ${action.client}: the client is not connected`);
      } else if (action.do === "send") {
        const message = action.message;
        socket.send(typeof message === "string" ? message : JSON.stringify(message));
      } else {
        this.clients.delete(action.client as string);
        socket.close(action.code ?? 1000, action.reason ?? "client closed");
      }
      return;
    }
    const stub = await this.stub(alias);
    if (action.do === "connect") {
      await this.connect(stub, alias, action.client as string);
      return;
    }
    let status: { done: boolean };
    // What a waited call or a request answered, when it answered (`harness:reply`).
    const reply = (ok: boolean, value: unknown) =>
      record(this.doName(alias), "harness:reply", {
        step: action.step ?? null,
        ok,
        value: ok ? ((value ?? null) as Json) : null
      });
    if (action.do === "call") {
      const method = action.method as string;
      const call = stub[method](...((action.args ?? []) as unknown[]));
      status = this.track(call, `call ${alias}.${method}`, action.wait === false ? undefined : reply);
    } else {
      const init: RequestInit = { method: action.http_method ?? "GET" };
      if (action.body !== undefined && action.body !== null) {
        init.body = JSON.stringify(action.body);
        init.headers = { "content-type": "application/json", ...(action.headers ?? {}) };
      } else if (action.headers) {
        init.headers = action.headers;
      }
      const request = new Request(`https://agent.test${action.path ?? "/"}`, init);
      const answered = stub.fetch(request).then(async (response: Response) => {
        const text = await response.text();
        let body: Json = text;
        try {
          body = JSON.parse(text) as Json;
        } catch {
          // a text body stays text
        }
        return { status: response.status, body };
      });
      status = this.track(answered, `request ${alias} ${action.path}`, reply);
    }
    await settle();
    if (action.wait !== false) {
      await this.advanceTo(this.plan.end_ms, () => status.done);
    }
  }

  /** Open a WebSocket to the agent as client `client`; every frame it receives is a record. */
  private async connect(stub: Stub, alias: string, client: string): Promise<void> {
    const request = new Request(`https://agent.test/agents/x/${this.doName(alias)}`, {
      headers: { Upgrade: "websocket" }
    });
    let socket: WebSocket | null = null;
    try {
      socket = (await stub.fetch(request)).webSocket;
    } catch (error) {
      this.errors.push(`connect ${client}: ${String(error)}`);
    }
    if (!socket) {
      this.errors.push(`connect ${client}: the agent accepted no WebSocket`);
      return;
    }
    socket.accept();
    const doName = this.doName(alias);
    socket.addEventListener("message", (event: MessageEvent) => {
      // The frames name the agent by its Durable Object name: the play's suffix goes.
      const text = String(event.data).split(this.suffix).join("");
      let frame: Json;
      try {
        frame = JSON.parse(text) as Json;
      } catch {
        frame = text;
      }
      record(doName, "harness:frame", { client, frame });
    });
    this.clients.set(client, socket);
    await settle();
  }

  async tables(): Promise<PlayResult["tables"]> {
    const result: PlayResult["tables"] = {};
    for (const [alias, stub] of this.stubs) {
      result[alias] = await runInDurableObject(stub, (_instance: unknown, state) => {
        const tables: Record<string, Record<string, Json>[]> = {};
        const names = [...state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'")]
          .map((row) => String(row.name))
          .filter((name) => !name.startsWith("sqlite_") && !name.startsWith("_cf_"));
        for (const name of names) {
          tables[name] = [...state.storage.sql.exec(`SELECT * FROM "${name}"`)] as Record<
            string,
            Json
          >[];
        }
        return tables;
      });
    }
    return result;
  }
}

async function play(plan: Plan, repetition: number): Promise<PlayResult> {
  resetRun();
  inFlight.clear();
  for (const agent of Object.values(plan.agents)) shared().options.set(agent.class, agent.options);
  const player = new Player(plan, `--${plan.name}--r${repetition}`);
  const actions = [...plan.actions];
  for (const action of actions) {
    await player.advanceTo(action.t);
    await player.perform(action);
    await settle();
  }
  await player.advanceTo(plan.end_ms);
  const records = [...shared().records];
  let tables: PlayResult["tables"] = {};
  try {
    tables = await player.tables();
  } catch (error) {
    player.errors.push(`reading tables: ${String(error)}`);
  }
  // Nothing of this play may reach the next one.
  for (const alias of Object.keys(plan.agents)) {
    const key = (env as unknown as Record<string, DurableObjectNamespace>)[
      plan.agents[alias].class
    ]
      ?.idFromName(player.doName(alias))
      .toString();
    if (key) dropTimers(key);
  }
  const suffix = `--${plan.name}--r${repetition}`;
  for (const item of records) {
    if (item.agent?.endsWith(suffix)) item.agent = item.agent.slice(0, -suffix.length);
  }
  return { records, tables, errors: player.errors };
}

const plans = JSON.parse(
  String((env as unknown as Record<string, string>).PLANS ?? '{"plans": []}')
) as { plans: Plan[] };

installVirtualDate();
subscribeChannels();

describe("plans", () => {
  if (plans.plans.length === 0) {
    it("has no plan to play", () => undefined);
  }
  for (const plan of plans.plans) {
    it(plan.name, async ({ task }) => {
      const plays: PlayResult[] = [];
      for (let repetition = 0; repetition < plan.repeat; repetition++) {
        plays.push(await play(plan, repetition));
      }
      (task.meta as Record<string, unknown>).agentsimPlays = JSON.parse(JSON.stringify(plays));
    });
  }
});
