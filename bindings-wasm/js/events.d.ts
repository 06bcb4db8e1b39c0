// The EventEmitter of halfopen-wasm (lib/platform.js): Node's, in the part a breaker needs.
export declare class EventEmitter {
  on(event: string | symbol, listener: (...args: any[]) => void): this
  addListener(event: string | symbol, listener: (...args: any[]) => void): this
  prependListener(event: string | symbol, listener: (...args: any[]) => void): this
  once(event: string | symbol, listener: (...args: any[]) => void): this
  off(event: string | symbol, listener: (...args: any[]) => void): this
  removeListener(event: string | symbol, listener: (...args: any[]) => void): this
  removeAllListeners(event?: string | symbol): this
  emit(event: string | symbol, ...args: any[]): boolean
  listeners(event: string | symbol): Function[]
  rawListeners(event: string | symbol): Function[]
  listenerCount(event: string | symbol): number
  eventNames(): (string | symbol)[]
}
