/**
 * `ChatToolChild`, the `child: chat` of the `workload: tools` player on the real SDK
 * (`scenarios/workloads/children.py` in the port): the SDK's own `AIChatAgent`
 * (`@cloudflare/ai-chat`, the release built beside `agents@0.21.0`), run as an agent tool, with
 * chat recovery on, answering from the scripted model (`scripted-model.ts`) that plays the
 * scenario's `model:` script as the port's model service does. Nothing of the chat itself is
 * written here: the turns, the resumable stream, the agent-tool adapter and recovery are the
 * SDK's. What is here is the harness's bookkeeping, which `HarnessAgent` gives the other players
 * (this class must extend `AIChatAgent` instead): incarnations, the alarm it arms, silence after
 * an eviction, its facet path and its tables.
 */
import { AIChatAgent, type OnChatMessageOptions } from "@cloudflare/ai-chat";
import { BASE_MS, type Json, shared } from "../harness";
import { readTables } from "./base";
import { type ModelRequest, modelEvents, sseResponse } from "./scripted-model";

/** The port's `MODEL_SERVICE`: chat hosts without a model of their own stream from it. */
const MODEL_SERVICE = "model";

/** The harness's bookkeeping for an agent that cannot extend `HarnessAgent` (see
 * `base.ts`): count the incarnation, mark it live, report the alarms it arms or clears, and
 * silence its observability events once it is no longer the live incarnation. Returns a
 * function telling whether it still is. */
export function harnessed(agent: { _emit(type: string, payload?: unknown): void }, ctx: DurableObjectState): () => boolean {
  const key = ctx.id.toString();
  const state = shared();
  const incarnation = (state.incarnations.get(key) ?? 0) + 1;
  state.incarnations.set(key, incarnation);
  state.live.set(key, true);
  state.activity += 1;
  const storage = ctx.storage as unknown as Record<string, unknown>;
  const setAlarm = ctx.storage.setAlarm.bind(ctx.storage);
  const deleteAlarm = ctx.storage.deleteAlarm.bind(ctx.storage);
  storage.setAlarm = (at: number | Date, options?: unknown) => {
    const ms = typeof at === "number" ? at : at.getTime();
    shared().alarms.set(key, ms - BASE_MS);
    shared().activity += 1;
    return setAlarm(at, options as never);
  };
  storage.deleteAlarm = (options?: unknown) => {
    shared().alarms.set(key, null);
    shared().activity += 1;
    return deleteAlarm(options as never);
  };
  const current = () =>
    shared().live.get(key) === true && shared().incarnations.get(key) === incarnation;
  const emit = agent._emit.bind(agent);
  agent._emit = (type: string, payload?: unknown) => {
    if (current()) emit(type, payload);
  };
  return current;
}

export class ChatToolChild extends AIChatAgent {
  private readonly owner: string;

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env as never);
    this.owner = ctx.id.toString();
    harnessed(this as never, ctx);
    // The port's chat hosts always recover an interrupted turn; the SDK's is opt-in.
    this.chatRecovery = true;
  }

  async onStart(): Promise<void> {
    this.registerFacet();
    await (super.onStart as (() => Promise<void>) | undefined)?.call(this);
  }

  async startAgentToolRun(input: unknown, options: never): Promise<never> {
    this.registerFacet();
    return (await super.startAgentToolRun(input as never, options)) as never;
  }

  /** The port's turn asks its model service with the transcript (the answer being built
   * included) and the names of the tools it offers; a recovery that continues an answer says
   * so. */
  async onChatMessage(
    _onFinish: unknown,
    options?: OnChatMessageOptions
  ): Promise<Response | undefined> {
    const request: ModelRequest = {
      messages: JSON.parse(JSON.stringify(this.messages)) as Json[],
      tools: ["work"],
      continuation: options?.continuation === true
    };
    return sseResponse(this.owner, await modelEvents(MODEL_SERVICE, request));
  }

  private registerFacet(): void {
    const path = (this as unknown as { selfPath?: { name: string }[] }).selfPath;
    if (!path || path.length < 2) return;
    shared().facets.set(this.owner, path.map((step) => step.name).join("/"));
  }

  /** Its tables (a chat child has no sub-agents), as `HarnessAgent.harnessTables`. */
  async harnessTables(): Promise<Record<string, Record<string, Record<string, Json>[]>>> {
    return { "": readTables(this.ctx.storage.sql) };
  }
}
