/**
 * The chat agents of the real side: the SDK's own `AIChatAgent` (`@cloudflare/ai-chat`, the
 * release built beside `agents@0.21.0`), answering from the scripted model (`scripted-model.ts`)
 * that plays the scenario's `model:` script as the port's model service does, with chat
 * recovery on. Nothing of the chat itself is written here: the turns, the resumable stream, the
 * agent-tool adapter, the notify hooks and recovery are the SDK's.
 *
 * `HarnessedChatAgent` is `AIChatAgent` with the harness's bookkeeping and helpers
 * (`withHarness` in `base.ts`, which `HarnessAgent` has on the SDK's `Agent`), chat recovery on,
 * and the scripted model as what it answers from.
 * `ChatToolChild` is the `child: chat` of the `workload: tools` player
 * (`scenarios/workloads/children.py` in the port); the chat host as the tools parent is in
 * `chat-host.ts`.
 */
import { AIChatAgent, type OnChatMessageOptions } from "@cloudflare/ai-chat";
import type { Json } from "../harness";
import { withHarness } from "./base";
import { type ModelRequest, modelEvents, sseResponse } from "./scripted-model";

/** The port's `MODEL_SERVICE`: chat hosts without a model of their own stream from it. */
const MODEL_SERVICE = "model";

export class HarnessedChatAgent extends withHarness(AIChatAgent) {
  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    // The port's chat hosts always recover an interrupted turn; the SDK's is opt-in.
    this.chatRecovery = true;
  }

  /** The names of the tools the port's host of this kind offers its model. */
  protected offeredTools(): string[] {
    return [];
  }

  /** The port's turn asks its model service with the transcript and the names of the tools
   * it offers; a recovery that continues an answer says so. */
  async onChatMessage(
    _onFinish: unknown,
    options?: OnChatMessageOptions
  ): Promise<Response | undefined> {
    const request: ModelRequest = {
      messages: JSON.parse(JSON.stringify(this.messages)) as Json[],
      tools: this.offeredTools(),
      continuation: options?.continuation === true
    };
    const service = this.opt("model_service", MODEL_SERVICE);
    return sseResponse(this.instanceKey, await modelEvents(service, request));
  }
}

export class ChatToolChild extends HarnessedChatAgent {
  /** The port's chat children offer one server tool, `work`. */
  protected offeredTools(): string[] {
    return ["work"];
  }

  async onStart(): Promise<void> {
    this.registerFacet();
  }

  async startAgentToolRun(input: unknown, options: never): Promise<never> {
    this.registerFacet();
    return (await super.startAgentToolRun(input as never, options)) as never;
  }
}
