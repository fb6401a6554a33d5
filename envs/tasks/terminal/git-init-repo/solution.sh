#!/bin/bash
git init /app/myrepo
