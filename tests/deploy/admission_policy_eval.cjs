// Evaluates a ValidatingAdmissionPolicy the way the API server does, with a real CEL
// implementation (npm's @bufbuild/cel, installed by scripts/install-deps.sh): the match
// conditions, then the variables in order (each may use the ones before), then the validations;
// an evaluation error counts as a denial (failurePolicy: Fail).
//   node admission_policy_eval.cjs POLICY.json REQUESTS.json
// REQUESTS.json: [{"request": {...}, "object": {...}|null, "oldObject": {...}|null}, ...]
// Prints one JSON array: [{"matched": bool, "allowed": bool, "message": "..."}, ...].
"use strict";
const fs = require("fs");
const cel = require("@bufbuild/cel");

// An expression's value; its evaluation error thrown, as the API server fails the request with it
// (run() returns a CelError instead of throwing, and a validation that is an error is not `false`).
function run(expression, activation) {
  const value = cel.run(expression, activation);
  if (cel.isCelError(value)) throw new Error(value.message + " (in " + expression.trim() + ")");
  return value;
}

// JSON objects as CEL maps (what the API server gives CEL for request, object and oldObject).
function toCel(value) {
  if (Array.isArray(value)) return value.map(toCel);
  if (value !== null && typeof value === "object")
    return new Map(Object.entries(value).map(([k, v]) => [k, toCel(v)]));
  return value;
}

function evaluate(policy, input) {
  const spec = policy.spec;
  const activation = {
    request: toCel(input.request),
    object: toCel(input.object ?? null),
    oldObject: toCel(input.oldObject ?? null),
    variables: new Map(),
  };
  for (const condition of spec.matchConditions ?? []) {
    if (run(condition.expression, activation) !== true) return { matched: false, allowed: true };
  }
  for (const variable of spec.variables ?? []) {
    activation.variables.set(variable.name, run(variable.expression, activation));
  }
  for (const validation of spec.validations ?? []) {
    if (run(validation.expression, activation) !== true) {
      const message = validation.messageExpression
        ? run(validation.messageExpression, activation)
        : validation.message;
      return { matched: true, allowed: false, message: String(message) };
    }
  }
  return { matched: true, allowed: true };
}

const policy = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const requests = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const results = requests.map((input) => {
  try {
    return evaluate(policy, input);
  } catch (e) {
    return { matched: true, allowed: false, message: "evaluation error: " + e.message };
  }
});
process.stdout.write(JSON.stringify(results) + "\n");
