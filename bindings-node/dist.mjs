// `make dist` (Node part): the addon cross-compiled for every platform the
// toolchain here allows (cargo-zigbuild and Zig from PyPI, through napi-rs's
// `--cross-compile`), laid out as napi-rs does: one npm package per platform
// in npm/<platform>/ (its package.json committed, its .node built here), the
// main package naming them in `optionalDependencies`; every package packed
// into dist/. Prints which targets built and which did not, and why.
//   node dist.mjs            (PATH must hold `cargo-zigbuild` and `python-zig`;
//                            DIST_PROFILE: the Cargo profile, default release)

import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
/** Cargo's target folder (CI gives the cross-builds one of their own). */
const TARGET = process.env.CARGO_TARGET_DIR || join(HERE, '..', 'target')
const OUT = join(TARGET, 'napi-dist')
/** The Cargo profile (`make dist DIST_PROFILE=…`): `release`, what is shipped, unless CI asks for its quicker check. */
const PROFILE = process.env.DIST_PROFILE || 'release'
export const DIST = join(HERE, 'dist')

/**
 * Target triple (a glibc version after the dot: the oldest the binary
 * needs, as manylinux2014's) -> napi-rs's platform name. Windows is
 * built apart (`buildWindows`).
 */
/** The oldest macOS each binary runs on (Rust's own minimums; Zig would
 * otherwise stamp the newest it knows). */
const MACOS = { 'x86_64-apple-darwin': '10.12', 'aarch64-apple-darwin': '11.0' }

export const TARGETS = {
  'x86_64-unknown-linux-gnu.2.17': 'linux-x64-gnu',
  'aarch64-unknown-linux-gnu.2.17': 'linux-arm64-gnu',
  'x86_64-unknown-linux-musl': 'linux-x64-musl',
  'aarch64-unknown-linux-musl': 'linux-arm64-musl',
  'x86_64-apple-darwin': 'darwin-x64',
  'aarch64-apple-darwin': 'darwin-arm64',
  'x86_64-pc-windows-gnu': 'win32-x64-msvc',
}
const WINDOWS = 'x86_64-pc-windows-gnu'

/**
 * Windows x64, built with the GNU target through cargo-zigbuild (the MSVC
 * target needs cargo-xwin, which downloads Microsoft's CRT from outside the
 * package registries; napi-rs refuses windows-gnu with --cross-compile).
 * Nothing of Node is linked: the addon takes Node-API from the host process
 * when it loads (napi's `dyn-symbols`, on for Windows in Cargo.toml), so
 * napi-build's search for a `libnode.dll` to link is met by an empty
 * stand-in. Packed as `win32-x64-msvc`, the package napi-rs's loader asks
 * for in the official Node for Windows (an MSVC build): Node-API is a C ABI,
 * and the binary's C runtime is the UCRT, as an MSVC build's.
 * `tests/test_dist.py` checks its form (PE, x86-64, the imports); no Windows
 * runs it here.
 */
function buildWindows(binary) {
  const stub = join(TARGET, 'windows-node')
  mkdirSync(stub, { recursive: true })
  writeFileSync(join(stub, 'libnode.dll'), '')
  // An empty archive: what the linker takes for `-lnode`.
  writeFileSync(join(stub, 'libnode.a'), '!<arch>\n')
  run('rustup', ['target', 'add', WINDOWS], { stdio: 'ignore' })
  run('cargo', ['zigbuild', '--profile', PROFILE, '-p', 'halfopen-node', '--target', WINDOWS], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LIBNODE_PATH: stub },
  })
  copyFileSync(join(TARGET, WINDOWS, PROFILE, 'halfopen_node.dll'), join(OUT, binary))
}

const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { cwd: HERE, encoding: 'utf8', ...opts })

/** The platform package's manifest, as napi-rs writes it. */
export function platformManifest(main, platform) {
  const [os, cpu, abi] = platform.split('-')
  const manifest = {
    name: `${main.name}-${platform}`,
    version: main.version,
    description: `The ${platform} binary of ${main.name} (see that package).`,
    main: `${main.napi.binaryName}.${platform}.node`,
    files: [`${main.napi.binaryName}.${platform}.node`],
    license: main.license,
    engines: main.engines,
    os: [os],
    cpu: [cpu],
  }
  if (abi === 'gnu' || abi === 'musl') manifest.libc = [abi === 'gnu' ? 'glibc' : abi]
  return manifest
}

function main() {
  const pkg = JSON.parse(readFileSync(join(HERE, 'package.json'), 'utf8'))
  rmSync(DIST, { recursive: true, force: true })
  mkdirSync(DIST, { recursive: true })
  mkdirSync(OUT, { recursive: true })
  const report = []
  for (const [triple, platform] of Object.entries(TARGETS)) {
    const rustTarget = triple.replace(/\.\d+\.\d+$/, '')
    try {
      const binary = `${pkg.napi.binaryName}.${platform}.node`
      if (triple === WINDOWS) {
        buildWindows(binary)
      } else {
        run('rustup', ['target', 'add', rustTarget], { stdio: 'ignore' })
        const env = MACOS[triple] ? { ...process.env, MACOSX_DEPLOYMENT_TARGET: MACOS[triple] } : process.env
        run('npx', ['napi', 'build', '--platform', '--profile', PROFILE, '--target', triple, '-x', '--no-js', '--dts', '../target/cross.d.ts', '--output-dir', OUT], {
          stdio: ['ignore', 'ignore', 'pipe'],
          env,
        })
      }
      const dir = join(HERE, 'npm', platform)
      mkdirSync(dir, { recursive: true })
      // Written only when it differs from the committed one (`make test`
      // reads them, and CI runs this beside it).
      const manifest = `${JSON.stringify(platformManifest(pkg, platform), null, 2)}\n`
      const file = join(dir, 'package.json')
      if (!existsSync(file) || readFileSync(file, 'utf8') !== manifest) writeFileSync(file, manifest)
      copyFileSync(join(OUT, binary), join(dir, binary))
      run('npm', ['pack', '--silent', '--pack-destination', DIST], { cwd: dir })
      report.push(`built  ${platform.padEnd(18)} ${triple}`)
    } catch (err) {
      report.push(`FAILED ${platform.padEnd(18)} ${triple}: ${String(err.stderr || err.message).trim().split('\n').slice(-3).join(' / ')}`)
    }
  }
  // The main package names the platform packages built, at its own version
  // (napi-rs's pre-publish step does the same: the repository's package.json
  // has none, so that `npm ci` needs no unpublished package). Packed from a
  // copy of its files, so that the package here is never changed (`make
  // test` packs it, and CI runs this beside it).
  const built = report.filter((line) => line.startsWith('built')).map((line) => line.split(/\s+/)[1])
  const optionalDependencies = Object.fromEntries(built.map((platform) => [`${pkg.name}-${platform}`, pkg.version]))
  const stage = join(OUT, 'main')
  rmSync(stage, { recursive: true, force: true })
  mkdirSync(stage, { recursive: true })
  for (const file of [...pkg.files, 'README.md']) cpSync(join(HERE, file), join(stage, file), { recursive: true })
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify({ ...pkg, optionalDependencies }, null, 2)}\n`)
  run('npm', ['pack', '--silent', '--pack-destination', DIST], { cwd: stage })
  console.log(report.join('\n'))
  if (report.some((line) => line.startsWith('FAILED'))) process.exit(1)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main()
