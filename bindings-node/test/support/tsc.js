'use strict'
// Type-checks a user's TypeScript against the package's declarations, as an
// app has them: `tsc --strict` (nodenext) on `source`, written beside a
// link to the package's node_modules (its dependencies' types).

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const assert = require('node:assert/strict')

/** The package's folder, for imports in `source`. */
const PACKAGE = path.join(__dirname, '..', '..')

/** Fails the test with tsc's output if `source` (a .ts file's text) does not type-check. */
function typeCheck(source) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halfopen-ts-'))
  fs.symlinkSync(path.join(PACKAGE, 'node_modules'), path.join(dir, 'node_modules'))
  try {
    fs.writeFileSync(path.join(dir, 'use.ts'), source)
    const tsc = path.join(PACKAGE, 'node_modules', '.bin', 'tsc')
    const args = ['--strict', '--noEmit', '--skipLibCheck', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022']
    try {
      execFileSync(tsc, [...args, '--typeRoots', path.join(PACKAGE, 'node_modules', '@types'), '--types', 'node', 'use.ts'], { cwd: dir, encoding: 'utf8' })
    } catch (err) {
      assert.fail(`tsc: ${err.stdout}`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

module.exports = { PACKAGE, typeCheck }
