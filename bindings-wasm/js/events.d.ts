// The EventEmitter of halfopen-wasm (lib/platform.js): Node's, in the part a
// breaker needs. The breakers' own declarations type each event's listener.
// Node's own listener type, so that the breakers' typed overloads extend it.
// biome-ignore lint/suspicious/noExplicitAny: any listener, as in @types/node
type Listener = (...args: any[]) => void

export declare class EventEmitter {
  on(event: string | symbol, listener: Listener): this
  addListener(event: string | symbol, listener: Listener): this
  prependListener(event: string | symbol, listener: Listener): this
  once(event: string | symbol, listener: Listener): this
  prependOnceListener(event: string | symbol, listener: Listener): this
  off(event: string | symbol, listener: Listener): this
  removeListener(event: string | symbol, listener: Listener): this
  removeAllListeners(event?: string | symbol): this
  emit(event: string | symbol, ...args: unknown[]): boolean
  listeners(event: string | symbol): Listener[]
  rawListeners(event: string | symbol): Listener[]
  listenerCount(event: string | symbol, listener?: Listener): number
  eventNames(): (string | symbol)[]
  setMaxListeners(n: number): this
  getMaxListeners(): number
}
