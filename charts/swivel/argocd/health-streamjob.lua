-- Argo CD health of a swivel.dev StreamJob (docs/argocd.md).
-- Stale status (observedGeneration < generation) -> Progressing; Degraded=True or phase
-- Failed/Degraded -> Degraded; Reconfiguring=True or a starting phase -> Progressing;
-- Ready=True -> Healthy; anything else -> Progressing.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c == nil then
    return fallback
  end
  local text = c.reason or fallback
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local status = obj.status
local generation = obj.metadata.generation
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Swivel operator to observe the job"
  return hs
end
if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

local phase = status.phase or "Pending"
local degraded = condition(status, "Degraded")
if (degraded ~= nil and degraded.status == "True") or phase == "Failed" or phase == "Degraded" then
  hs.status = "Degraded"
  hs.message = describe(degraded, status.message or ("Job is " .. phase))
  return hs
end

local reconfiguring = condition(status, "Reconfiguring")
if reconfiguring ~= nil and reconfiguring.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconfiguring, "Reconfiguring")
  return hs
end
if phase == "Pending" or phase == "Starting" or phase == "Reconfiguring" or phase == "Restarting" then
  hs.status = "Progressing"
  hs.message = status.message or ("Job is " .. phase)
  return hs
end

local ready = condition(status, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Running")
  return hs
end
hs.status = "Progressing"
hs.message = describe(ready, "Waiting for the job to become Ready")
return hs
