#!/bin/bash
grep -F '[ERROR]' /app/logs/app.log > /app/errors.log
